package semver_test

import (
	"fmt"

	"github.com/toolplane/toolplane/semver"
)

// A reference pins a tool to a range; a version is given only if the
// range contains it.
func ExampleSplitRef() {
	name, text := semver.SplitRef("payments.refund_order@^2.1.0")
	r, err := semver.ParseRange(text)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range []string{"2.0.0", "2.4.1", "2.5.0-rc.1", "3.0.0"} {
		v, err := semver.Parse(s)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(name, r, v, r.Contains(v))
	}
	// Output:
	// payments.refund_order ^2.1.0 2.0.0 false
	// payments.refund_order ^2.1.0 2.4.1 true
	// payments.refund_order ^2.1.0 2.5.0-rc.1 false
	// payments.refund_order ^2.1.0 3.0.0 false
}

func ExampleParse() {
	_, err := semver.Parse("v2.1.0")
	fmt.Println(err)
	// Output: semver: parse "v2.1.0": invalid semantic version: drop the leading 'v'; tool versions are written like 2.1.0
}
