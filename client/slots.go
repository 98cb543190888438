package client

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// A sharded cluster splits Redis Cluster's 16,384 hash slots into shards, each
// a Raft group of a few replicas led by one of them. The client learns which
// shard holds which slots, who leads it and which nodes hold it (CLUSTER
// SHARDS, or CLUSTER SLOTS of a node that does not know SHARDS), so that a
// command on one key goes to a node that serves it without a forwarding hop.
// Any node serves any key (it forwards), so a stale map costs a hop, never a
// wrong answer.

// slotCount is the number of hash slots.
const slotCount = 16384

// crcTable is CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0) by
// byte, the checksum Redis Cluster hashes keys with.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c = c<<8 ^ crcTable[byte(c>>8)^s[i]]
	}
	return c
}

// keySlot is the hash slot of key, as Redis Cluster computes it: CRC16 of
// the key mod 16384, or of its hash tag, the bytes between its first '{' and
// the first '}' after it when there are any ("{user1000}.following" and
// "{user1000}.followers" share a slot; "foo{}{bar}" hashes whole).
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) & (slotCount - 1)
}

// commandKey is the one key a command acts on, if it has exactly one: the
// filter commands (BF.*, CF.*, CBF.*), TYPE, and DEL or EXISTS of one key.
func commandKey(args []string) (string, bool) {
	if len(args) < 2 {
		return "", false
	}
	name := strings.ToUpper(args[0])
	switch {
	case name == "DEL" || name == "EXISTS":
		return args[1], len(args) == 2
	case name == "TYPE", strings.HasPrefix(name, "BF."), strings.HasPrefix(name, "CF."), strings.HasPrefix(name, "CBF."):
		return args[1], true
	}
	return "", false
}

// shard is one shard of the slot map, as a node described it.
type shard struct {
	// leader is the RESP address of the replica that leads it, "" when none
	// is known (none was named, or a request to it failed since). Guarded by
	// the Client's mu.
	leader string
	// replicas are the RESP addresses of the nodes that hold it and are not
	// known to be failing, the leader first.
	replicas []string
}

// slotRange is slots first to last, both included, of one shard.
type slotRange struct {
	first, last int
	sh          *shard
}

// slotMap is the cluster's slot map: ranges sorted by first slot, not
// overlapping. A slot no range holds has no shard (its commands take the
// routing of commands without a key).
type slotMap struct {
	ranges []slotRange
	shards []*shard
}

// shardOf returns the shard that holds slot s, or nil.
func (m *slotMap) shardOf(s int) *shard {
	i := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].last >= s })
	if i < len(m.ranges) && m.ranges[i].first <= s {
		return m.ranges[i].sh
	}
	return nil
}

// newSlotMap checks ranges (within the slots, not overlapping) and sorts them.
func newSlotMap(shards []*shard, ranges []slotRange) (*slotMap, error) {
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].first < ranges[j].first })
	for i, r := range ranges {
		if r.first < 0 || r.last >= slotCount || r.first > r.last {
			return nil, fmt.Errorf("slot range %d-%d", r.first, r.last)
		}
		if i > 0 && r.first <= ranges[i-1].last {
			return nil, fmt.Errorf("slot ranges %d-%d and %d-%d overlap", ranges[i-1].first, ranges[i-1].last, r.first, r.last)
		}
	}
	return &slotMap{ranges: ranges, shards: shards}, nil
}

var errNoShardsReply = errors.New("not a slot map")

// parseShards reads CLUSTER SHARDS in RESP2: per shard a flat map of "slots"
// (pairs of range ends) and "nodes" (each a flat map of id, port, ip,
// endpoint, role, replication-offset, health). A replica whose health is not
// "online" is left out; the one whose role is "master" leads.
func parseShards(r reply) (*slotMap, error) {
	if r.kind != '*' {
		return nil, errNoShardsReply
	}
	var shards []*shard
	var ranges []slotRange
	for _, e := range r.arr {
		fields, ok := flatMap(e)
		if !ok {
			return nil, errNoShardsReply
		}
		sh := &shard{}
		slots, nodes := fields["slots"], fields["nodes"]
		if slots.kind != '*' || len(slots.arr)%2 != 0 || nodes.kind != '*' {
			return nil, errNoShardsReply
		}
		for i := 0; i < len(slots.arr); i += 2 {
			if slots.arr[i].kind != ':' || slots.arr[i+1].kind != ':' {
				return nil, errNoShardsReply
			}
			ranges = append(ranges, slotRange{first: int(slots.arr[i].num), last: int(slots.arr[i+1].num), sh: sh})
		}
		for _, n := range nodes.arr {
			nf, ok := flatMap(n)
			if !ok {
				return nil, errNoShardsReply
			}
			host := nf["endpoint"].str
			if host == "" || host == "?" {
				host = nf["ip"].str
			}
			port := nf["port"]
			if host == "" || port.kind != ':' || port.num <= 0 || nf["health"].str != "online" {
				continue
			}
			addr := net.JoinHostPort(host, strconv.FormatInt(port.num, 10))
			if nf["role"].str == "master" {
				sh.leader = addr
				sh.replicas = append([]string{addr}, sh.replicas...)
			} else {
				sh.replicas = append(sh.replicas, addr)
			}
		}
		shards = append(shards, sh)
	}
	return newSlotMap(shards, ranges)
}

// flatMap reads a RESP2 map (a flat array of names and values).
func flatMap(r reply) (map[string]reply, bool) {
	if r.kind != '*' || len(r.arr)%2 != 0 {
		return nil, false
	}
	m := make(map[string]reply, len(r.arr)/2)
	for i := 0; i < len(r.arr); i += 2 {
		k := r.arr[i]
		if k.kind != '$' && k.kind != '+' {
			return nil, false
		}
		m[k.str] = r.arr[i+1]
	}
	return m, true
}

// parseSlots reads CLUSTER SLOTS: per range, its first and last slot, then
// [host, port, id, ...] of its master (taken as the leader) and of each
// replica.
func parseSlots(r reply) (*slotMap, error) {
	if r.kind != '*' {
		return nil, errNoShardsReply
	}
	var shards []*shard
	var ranges []slotRange
	for _, e := range r.arr {
		if e.kind != '*' || len(e.arr) < 2 || e.arr[0].kind != ':' || e.arr[1].kind != ':' {
			return nil, errNoShardsReply
		}
		sh := &shard{}
		for i, n := range e.arr[2:] {
			if n.kind != '*' || len(n.arr) < 2 || n.arr[0].kind != '$' || n.arr[1].kind != ':' || n.arr[0].str == "" {
				continue
			}
			addr := net.JoinHostPort(n.arr[0].str, strconv.FormatInt(n.arr[1].num, 10))
			if i == 0 {
				sh.leader = addr
			}
			sh.replicas = append(sh.replicas, addr)
		}
		shards = append(shards, sh)
		ranges = append(ranges, slotRange{first: int(e.arr[0].num), last: int(e.arr[1].num), sh: sh})
	}
	return newSlotMap(shards, ranges)
}
