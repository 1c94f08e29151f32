"""The pure core (SPEC §1-2, §5-7): states, transition table, invariants, guards, proposals,
validation, budgets, effect attempt lifecycle, completion, replay. Standard library only."""
