package semver_test

import (
	"fmt"

	"github.com/toolplane/toolplane/semver"
)

// A reference pins a tool to a range; the version a caller is given is the
// newest published one the range contains.
func ExampleLatest() {
	name, text := semver.SplitRef("payments.refund_order@^2.1.0")
	r, err := semver.ParseRange(text)
	if err != nil {
		fmt.Println(err)
		return
	}
	var published []semver.Version
	for _, s := range []string{"2.0.0", "2.1.0", "2.4.1", "2.5.0-rc.1", "3.0.0"} {
		v, err := semver.Parse(s)
		if err != nil {
			fmt.Println(err)
			return
		}
		published = append(published, v)
	}
	v, ok := semver.Latest(r, published)
	fmt.Println(name, r, v, ok)
	// Output: payments.refund_order ^2.1.0 2.4.1 true
}

func ExampleParse() {
	_, err := semver.Parse("v2.1.0")
	fmt.Println(err)
	// Output: semver: parse "v2.1.0": invalid semantic version: drop the leading 'v'; tool versions are written like 2.1.0
}
