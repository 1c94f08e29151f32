"""Who may do what: tenants, roles (approver, operator, catalog admin), object access and
the throttled sign-in. Every view fetches tenant-owned objects through ``access.objects``."""
