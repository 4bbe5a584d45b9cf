"""Who runs which thread: runners, leases across workers, the relay, schedules.

The scheduler's runners, the PostgreSQL workers' leases, the relay of frames between them,
and the packs' schedules.
"""
