package transport

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// CONFIG GET, SET, RESETSTAT and HELP, as Redis 7 answers them. The
// parameters are the few tools ask for, which come from the node's flags and
// cannot change while it runs, and RedisBloom's settings (bloomconfig.go),
// which can.
func configSubcommands() []*command {
	a := flagsAdminish
	return []*command{
		{name: "get", arity: -3, flags: a, parse: parseConfigGet},
		{name: "set", arity: -4, flags: a, parse: parseConfigSet},
		{name: "resetstat", arity: 2, flags: a, parse: parseConfigResetStat},
		{name: "help", arity: 2, flags: a, parse: helpParser(configHelp)},
	}
}

var configHelp = []string{
	"GET <pattern>",
	"    Return parameters matching the glob-like <pattern> and their values.",
	"SET <directive> <value>",
	"    Set the configuration <directive> to <value>.",
	"RESETSTAT",
	"    Reset statistics reported by the INFO command.",
}

// configParam is one parameter CONFIG GET answers; set is nil for those fixed
// at start (Redis's immutable configs).
type configParam struct {
	name string
	get  func(s *Server, bc *bloomConfig) string
	set  func(bc *bloomConfig, v []byte) error
}

// configParams lists the parameters in the order CONFIG GET answers them.
func configParams() []configParam {
	fixed := func(name string, get func(s *Server) string) configParam {
		return configParam{name: name, get: func(s *Server, _ *bloomConfig) string { return get(s) }}
	}
	ps := []configParam{
		// Every write is fsynced to the Raft log before it is acknowledged.
		fixed("appendonly", func(*Server) string { return "yes" }),
		fixed("appendfsync", func(*Server) string { return "always" }),
		fixed("save", func(*Server) string { return "" }),
		fixed("databases", func(*Server) string { return "1" }),
		fixed("maxclients", func(s *Server) string { return strconv.Itoa(s.cfg.MaxClients) }),
		fixed("maxmemory", func(s *Server) string { return strconv.FormatUint(s.cfg.MaxMemory, 10) }),
		fixed("maxmemory-policy", func(*Server) string { return "noeviction" }),
		fixed("timeout", func(s *Server) string { return strconv.FormatInt(int64(s.cfg.IdleTimeout.Seconds()), 10) }),
	}
	for _, b := range bloomSettings {
		get := b.get
		ps = append(ps, configParam{name: b.name, set: b.set,
			get: func(_ *Server, bc *bloomConfig) string { return get(bc) }})
	}
	return ps
}

// parseConfigGet: CONFIG GET pattern [pattern ...], every parameter matching
// one of the glob patterns (ignoring case), once, as a map.
func parseConfigGet(s *Server, args [][]byte) (op, error) {
	pats := make([][]byte, len(args)-2)
	for i, p := range args[2:] {
		pats[i] = bytes.ToLower(p)
	}
	return localOp(func(c *session, w *reply) {
		bc := s.bloom.Load()
		var out []string
		for _, p := range s.configs {
			for _, pat := range pats {
				if globMatch(pat, []byte(p.name)) {
					out = append(out, p.name, p.get(s, bc))
					break
				}
			}
		}
		w.mapHeader(len(out) / 2)
		for _, x := range out {
			w.bulkString(x)
		}
	}), nil
}

// parseConfigSet: CONFIG SET parameter value [parameter value ...], all or
// nothing, with Redis's errors: the first unknown, fixed or repeated
// parameter, else the first value refused (RedisBloom's message).
func parseConfigSet(s *Server, args [][]byte) (op, error) {
	if len(args)%2 != 0 {
		return op{}, errSyntax
	}
	var params []*configParam
	for i := 2; i < len(args); i += 2 {
		p := s.configParam(args[i])
		switch {
		case p == nil:
			return op{}, redisError(fmt.Sprintf("ERR Unknown option or number of arguments for CONFIG SET - '%s'", args[i]))
		case p.set == nil:
			return op{}, configSetFailed(args[i], "can't set immutable config")
		}
		for _, q := range params {
			if q == p {
				return op{}, configSetFailed(args[i], "duplicate parameter")
			}
		}
		params = append(params, p)
	}
	return localOp(func(c *session, w *reply) {
		if err := s.setBloom(params, args); err != nil {
			w.fail(err)
			return
		}
		w.ok()
	}), nil
}

// setBloom applies CONFIG SET's values to a copy of the settings and swaps it
// in only if every value was accepted.
func (s *Server) setBloom(params []*configParam, args [][]byte) error {
	s.bloomMu.Lock()
	defer s.bloomMu.Unlock()
	bc := *s.bloom.Load()
	for i, p := range params {
		if err := p.set(&bc, args[3+2*i]); err != nil {
			return configSetFailed([]byte(p.name), err.Error())
		}
	}
	s.bloom.Store(&bc)
	return nil
}

func configSetFailed(name []byte, why string) error {
	return redisError(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - %s", name, why))
}

// configParam finds a parameter by name, ignoring case.
func (s *Server) configParam(name []byte) *configParam {
	for i := range s.configs {
		if strings.EqualFold(s.configs[i].name, string(name)) {
			return &s.configs[i]
		}
	}
	return nil
}

// parseConfigResetStat: CONFIG RESETSTAT zeroes INFO's stats and commandstats
// counters (the Prometheus series keep counting: they never go back).
func parseConfigResetStat(s *Server, args [][]byte) (op, error) {
	return localOp(func(c *session, w *reply) {
		s.resetStats()
		w.ok()
	}), nil
}
