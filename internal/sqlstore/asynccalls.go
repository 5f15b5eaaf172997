package sqlstore

import "github.com/toolplane/toolplane"

// AsyncCallColumns are the columns of async_calls, in the order both
// stores scan them.
const AsyncCallColumns = `organization_id, id, tool, key, agent_id, arguments, invocation, status, result, code,
	approval_id, cancel_requested, callback_url, callback_state, callback_attempts, created_at, updated_at, started_at, ended_at, runner, user_id,
	callback_error, callback_next_at`

// MoveAsyncCall answers the compare-and-set of toolplane.AsyncCallStore's
// MoveAsyncCall: the call moves to m.To only from a state in from, so a
// cancel and a completion racing each other leave exactly one terminal
// state. at is m.At in the stores' microseconds, result m.Result as the
// store binds bytes.
func MoveAsyncCall(d Dialect, org, id string, from []toolplane.AsyncStatus, m toolplane.AsyncMove, at int64, result any) *Query {
	q := New(d, `UPDATE async_calls SET status = ?, updated_at = ?`, string(m.To), at)
	if m.To == toolplane.AsyncRunning {
		q.Add(`, started_at = COALESCE(started_at, ?), runner = ?`, at, m.Runner)
	}
	if m.To == toolplane.AsyncQueued {
		q.Add(`, runner = ''`)
	}
	if m.To.Terminal() {
		q.Add(`, ended_at = ?, result = ?, code = ?, callback_state = CASE WHEN callback_url <> '' THEN 'pending' ELSE callback_state END`,
			at, result, m.Code)
	}
	if m.ApprovalID != "" {
		q.Add(`, approval_id = ?`, m.ApprovalID)
	}
	q.Add(` WHERE organization_id = ? AND id = ?`, org, id)
	statuses := make([]string, len(from))
	for i, f := range from {
		statuses[i] = string(f)
	}
	q.In(`status`, statuses)
	return q
}
