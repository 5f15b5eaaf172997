// Package browsertest holds the tests that drive the pages people use
// (sign-in, the console) in a real headless Chromium against a real
// toolplane binary: built from ./cmd/toolplane, started with `serve
// --demo` on a free port, and reached only over HTTP, as a person's
// browser and an agent's client reach it. Sign-in through an OpenID
// provider runs against oauthtest's provider in the test's process, on
// loopback, whose own login page the browser fills.
//
// The tests run when $TOOLPLANE_TEST_CHROMIUM names a Chromium (or
// Chrome) executable; .ci/run installs Debian's chromium and sets it.
// Without it they are skipped, except under CI (CI=true), where a missing
// browser fails them: a green run must have driven the browser. -short
// leaves them out, as it does the other end-to-end runs.
//
// With TOOLPLANE_WRITE_SCREENSHOT=1 the console test saves the approvals
// inbox it sees to docs/console.png, the picture the README shows.
package browsertest
