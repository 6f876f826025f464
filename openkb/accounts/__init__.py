"""Users, tenants and memberships (the operator-facing side; registration lives in ``registration``)."""
