package transport

import (
	"fmt"
	"testing"

	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/fsm"
)

// clientClass is the Go client's class for each class of the contract:
// refusals that stay (memory, disk, upgrade) are final for a retry loop.
var clientClass = map[cluster.Class]client.ErrorClass{
	cluster.ClassAnswer:        client.Final,
	cluster.ClassNotApplied:    client.NotApplied,
	cluster.ClassRefused:       client.Final,
	cluster.ClassIndeterminate: client.Indeterminate,
}

// TestClientReadsWhatTransportSends pins the Go client's classification
// against the error replies this package actually renders: every error of
// cluster's contract (bare, wrapped, and as it arrives forwarded from the
// leader), an error the contract does not know, the state machine's domain
// errors, failed reads, and transport's own refusals.
func TestClientReadsWhatTransportSends(t *testing.T) {
	type sent struct {
		what  string
		reply string
		want  client.ErrorClass
	}
	var cases []sent
	for _, k := range cluster.Contract {
		want := clientClass[k.Class]
		for _, err := range []error{k.Err, fmt.Errorf("%w: on n2", k.Err), fmt.Errorf("forwarding: %w", k.Err)} {
			cases = append(cases, sent{fmt.Sprintf("%v (%v)", err, k.Class), renderErr(err), want})
		}
	}
	cases = append(cases,
		sent{"an error the contract does not know", renderErr(fmt.Errorf("disk on fire")), client.Indeterminate},
		sent{"leadership lost after proposing", renderErr(fmt.Errorf("%w: leadership lost: %w", cluster.ErrIndeterminate, cluster.ErrNotLeader)), client.Indeterminate},
	)
	for _, err := range []error{fsm.ErrNotFound, fsm.ErrExists, fsm.ErrWrongType, fsm.ErrFull, fsm.ErrMaxExpansions,
		fsm.ErrNonScalingFull, fsm.ErrCannotGrow, fsm.ErrBadPosition, fsm.ErrBadData, fsm.ErrBadSpec, fsm.ErrSessionExpired} {
		cases = append(cases, sent{"domain: " + err.Error(), renderErr(err), client.Final})
	}
	for _, err := range []error{cluster.ErrNoLeader, cluster.ErrNotLeader, cluster.ErrShutdown,
		fmt.Errorf("%w: read round timed out", cluster.ErrIndeterminate), fmt.Errorf("%w: crc", cluster.ErrHalted)} {
		cases = append(cases, sent{"read: " + err.Error(), readErr(err).Error(), client.NotApplied})
	}
	cases = append(cases,
		sent{"too many clients", string(errMaxClients), client.NotApplied},
		sent{"request buffers full", protocolReply(errBudget), client.NotApplied},
		sent{"a redirect to the shard's leader", fmt.Sprintf(errMovedFormat, 866, "127.0.0.1:6380"), client.NotApplied},
		sent{"a malformed request", protocolReply(protocolError("invalid bulk length")), client.Final},
		sent{"a syntax error", string(errSyntax), client.Final},
	)
	for _, c := range cases {
		if got := client.ClassifyError(c.reply); got != c.want {
			t.Errorf("%s: the client reads %q as class %d, want %d", c.what, c.reply, got, c.want)
		}
	}
}
