package client

import (
	"math/rand/v2"
	"testing"

	"github.com/rookerydb/rookery/internal/slot"
)

// TestKeySlotAsNodes: the client and the nodes put every key in the same slot
// (the client keeps its own copy, since it imports nothing of the server):
// random keys, with and without hash tags, braces anywhere.
func TestKeySlotAsNodes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab{}:xyz\x00\xff"
	for range 20000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if got, want := keySlot(string(b)), slot.OfString(string(b)); got != want {
			t.Fatalf("slot of %q: client %d, nodes %d", b, got, want)
		}
	}
}
