package toolplane.authz

allow contains "x" if input.user.boss == "kim"
