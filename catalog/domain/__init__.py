"""The catalog's pure core: the version lifecycle, discovered tool definitions and
the classification of contract changes. Standard library only."""
