package toolplane.authz

allow contains "x" if input.arguments.colour == "red"
