package toolplane.authz

allow contains "x" if input.principal.clearance == "top"
