"""The domain: runs, sessions, intents, workspace approval and tree locks, capacity, outcomes."""
