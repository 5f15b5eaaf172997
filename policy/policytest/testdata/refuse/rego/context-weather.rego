package toolplane.authz

allow contains "x" if input.context.weather == "fine"
