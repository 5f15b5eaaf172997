package toolplane.authz

allow contains "x" if input.tool.colour == "red"
