// Package readme holds the test that runs the repository's README: its
// shell blocks, in order, against a server started the way the README
// starts it, so that what a newcomer pastes keeps working.
//
// Every ```sh block of README.md carries a marker on the line before it:
//
//	<!-- readme-test: run expect="replayed" -->   run it; its output must hold each expect ('…' quotes too)
//	<!-- readme-test: serve -->                   each line starts a server: started on a free port, checked, kept or stopped
//	<!-- readme-test: skip REASON -->             not run (long-running, needs the network, runs the tests themselves)
//
// A `postgres` word after run or serve runs the block only when
// $TOOLPLANE_TEST_POSTGRES is set. A block without a marker fails the test,
// so a new block is never silently left out.
package readme
