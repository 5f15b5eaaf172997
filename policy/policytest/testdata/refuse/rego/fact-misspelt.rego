package toolplane.authz

allow contains "x" if input.facts.order.acount == "a"
