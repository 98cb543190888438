package transport

// COMMAND DOCS: what each command does and takes, in Redis 7's reply shape,
// so that redis-cli shows argument hints as one types and `help <command>`
// describes it. The filter commands are documented as a module's: group
// "module" and module "bf", as Redis reports the commands of a loaded
// RedisBloom (our CBF.* are listed with them). The texts are our own, from
// PROTOCOL.md and RedisBloom's documented syntax.

// cmdDoc is one command's documentation.
type cmdDoc struct {
	summary, since, group, complexity string
	module                            string // "bf" for the filter commands
	args                              []argDoc
}

// argDoc is one argument as COMMAND DOCS describes it: a name, a type
// (string, integer, double, key, pattern, unix-time, pure-token, oneof,
// block), the keyword that introduces it, and whether it is optional or may
// repeat. A oneof or block holds its own arguments.
type argDoc struct {
	name, typ, token string
	optional         bool
	multiple         bool
	args             []argDoc
}

// Helpers that keep the tables short.

func keyArg() argDoc           { return argDoc{name: "key", typ: "key"} }
func keyNamed(n string) argDoc { return argDoc{name: n, typ: "key"} }
func str(n string) argDoc      { return argDoc{name: n, typ: "string"} }
func integer(n string) argDoc  { return argDoc{name: n, typ: "integer"} }
func double(n string) argDoc   { return argDoc{name: n, typ: "double"} }
func pattern(n string) argDoc  { return argDoc{name: n, typ: "pattern"} }

// pure is a keyword alone (NONSCALING), named as its lower case.
func pure(token string) argDoc {
	return argDoc{name: lowerASCII(token), typ: "pure-token", token: token}
}

// tok puts a keyword before a (TOKEN value).
func tok(token string, a argDoc) argDoc { a.token = token; return a }

// opt makes a optional.
func opt(a argDoc) argDoc { a.optional = true; return a }

// many lets a repeat.
func many(a argDoc) argDoc { a.multiple = true; return a }

// oneOf is exactly one of alts.
func oneOf(name string, alts ...argDoc) argDoc { return argDoc{name: name, typ: "oneof", args: alts} }

// block is parts in sequence.
func block(name string, parts ...argDoc) argDoc { return argDoc{name: name, typ: "block", args: parts} }

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Complexities shared by several filter commands.
const (
	oBloomItem  = "O(k), where k is the number of hash functions"
	oBloomItems = "O(k * n), where k is the number of hash functions and n the number of items"
	oCuckooItem = "O(f), where f is the number of sub-filters"
	oCuckooAdd  = "O(f + i), where f is the number of sub-filters and i the maximum iterations"
	oCuckooMany = "O(n * (f + i)), where n is the number of items, f the number of sub-filters and i the maximum iterations"
	oDump       = "O(n), where n is the size of the filter"
)

// bfDoc, cfDoc and cbfDoc document module commands.
func bfDoc(summary, since, complexity string, args ...argDoc) *cmdDoc {
	return &cmdDoc{summary: summary, since: since, group: "module", complexity: complexity, module: "bf", args: args}
}

// filterDocs documents the BF.*, CF.* and CBF.* commands.
var filterDocs = map[string]*cmdDoc{
	"bf.reserve": bfDoc("Creates an empty Bloom filter with the given error rate and initial capacity, or one over a window of time or insertions",
		"1.0.0", "O(1)",
		keyArg(), double("error_rate"), integer("capacity"),
		opt(tok("EXPANSION", integer("expansion"))), opt(pure("NONSCALING")),
		opt(oneOf("window", tok("WINDOW", str("duration")), tok("LAST", integer("n"))))),
	"bf.add": bfDoc("Adds an item to a Bloom filter, creating the filter if it does not exist", "1.0.0", oBloomItem,
		keyArg(), str("item")),
	"bf.madd": bfDoc("Adds one or more items to a Bloom filter, creating the filter if it does not exist", "1.0.0", oBloomItems,
		keyArg(), many(str("item"))),
	"bf.insert": bfDoc("Adds one or more items to a Bloom filter, creating it with the given parameters if it does not exist",
		"1.0.0", oBloomItems,
		keyArg(), opt(tok("CAPACITY", integer("capacity"))), opt(tok("ERROR", double("error"))),
		opt(tok("EXPANSION", integer("expansion"))), opt(pure("NOCREATE")), opt(pure("NONSCALING")),
		many(tok("ITEMS", str("item")))),
	"bf.exists": bfDoc("Reports whether an item may have been added to a Bloom filter", "1.0.0", oBloomItem,
		keyArg(), str("item")),
	"bf.mexists": bfDoc("Reports, for each item, whether it may have been added to a Bloom filter", "1.0.0", oBloomItems,
		keyArg(), many(str("item"))),
	"bf.card": bfDoc("Returns the number of items added to a Bloom filter", "2.4.4", "O(1)", keyArg()),
	"bf.info": bfDoc("Returns the parameters and fill of a Bloom filter", "1.0.0", "O(1)",
		keyArg(), opt(oneOf("single_value", pure("CAPACITY"), pure("SIZE"), pure("FILTERS"), pure("ITEMS"),
			pure("EXPANSION"), pure("WINDOW")))),
	"bf.debug": bfDoc("Describes each sub-filter of a Bloom filter", "1.0.0", "O(f), where f is the number of sub-filters",
		keyArg()),
	"bf.scandump": bfDoc("Returns the next chunk of a Bloom filter's dump, for BF.LOADCHUNK", "1.0.0", oDump,
		keyArg(), integer("iterator")),
	"bf.loadchunk": bfDoc("Restores a Bloom filter from a chunk of its BF.SCANDUMP dump", "1.0.0", oDump,
		keyArg(), integer("iterator"), str("data")),

	"cf.reserve": bfDoc("Creates an empty cuckoo filter with the given capacity and parameters, or one over a window of time",
		"1.0.0", "O(1)",
		keyArg(), integer("capacity"), opt(tok("BUCKETSIZE", integer("bucketsize"))),
		opt(tok("MAXITERATIONS", integer("maxiterations"))), opt(tok("EXPANSION", integer("expansion"))),
		opt(tok("WINDOW", str("duration")))),
	"cf.add": bfDoc("Adds an item to a cuckoo filter, creating the filter if it does not exist", "1.0.0", oCuckooAdd,
		keyArg(), str("item")),
	"cf.addnx": bfDoc("Adds an item to a cuckoo filter unless it may already be there, creating the filter if it does not exist",
		"1.0.0", oCuckooAdd, keyArg(), str("item")),
	"cf.insert": bfDoc("Adds one or more items to a cuckoo filter, creating it with the given capacity if it does not exist",
		"1.0.0", oCuckooMany,
		keyArg(), opt(tok("CAPACITY", integer("capacity"))), opt(pure("NOCREATE")), many(tok("ITEMS", str("item")))),
	"cf.insertnx": bfDoc("Adds one or more items to a cuckoo filter unless they may already be there, creating it if it does not exist",
		"1.0.0", oCuckooMany,
		keyArg(), opt(tok("CAPACITY", integer("capacity"))), opt(pure("NOCREATE")), many(tok("ITEMS", str("item")))),
	"cf.exists": bfDoc("Reports whether an item may be in a cuckoo filter", "1.0.0", oCuckooItem, keyArg(), str("item")),
	"cf.mexists": bfDoc("Reports, for each item, whether it may be in a cuckoo filter", "1.0.0",
		"O(n * f), where n is the number of items and f the number of sub-filters", keyArg(), many(str("item"))),
	"cf.count": bfDoc("Returns an upper bound of how many copies of an item a cuckoo filter holds", "1.0.0", oCuckooItem,
		keyArg(), str("item")),
	"cf.del": bfDoc("Deletes one copy of an item from a cuckoo filter", "1.0.0", oCuckooItem, keyArg(), str("item")),
	"cf.info": bfDoc("Returns the parameters and fill of a cuckoo filter", "1.0.0", "O(1)", keyArg(),
		opt(pure("WINDOW"))),
	"cf.debug": bfDoc("Describes the layout of a cuckoo filter", "1.0.0", "O(1)", keyArg()),
	"cf.compact": bfDoc("Moves a cuckoo filter's fingerprints into older sub-filters and drops the emptied ones", "1.0.0",
		"O(n), where n is the size of the filter", keyArg()),
	"cf.scandump": bfDoc("Returns the next chunk of a cuckoo filter's dump, for CF.LOADCHUNK", "1.0.0", oDump,
		keyArg(), integer("iterator")),
	"cf.loadchunk": bfDoc("Restores a cuckoo filter from a chunk of its CF.SCANDUMP dump", "1.0.0", oDump,
		keyArg(), integer("iterator"), str("data")),

	"cbf.reserve": bfDoc("Creates an empty counting Bloom filter (rookery's own)", "0.1.0", "O(1)",
		keyArg(), double("error_rate"), integer("capacity"),
		opt(tok("COUNTERBITS", oneOf("counterbits", pure("4"), pure("8")))),
		opt(tok("LAYOUT", oneOf("layout", pure("STANDARD"), pure("DLEFT"))))),
	"cbf.add": bfDoc("Adds an item to a counting Bloom filter, creating the filter if it does not exist", "0.1.0", oBloomItem,
		keyArg(), str("item")),
	"cbf.madd": bfDoc("Adds one or more items to a counting Bloom filter, creating the filter if it does not exist", "0.1.0",
		oBloomItems, keyArg(), many(str("item"))),
	"cbf.del": bfDoc("Removes one addition of an item from a counting Bloom filter", "0.1.0", oBloomItem,
		keyArg(), str("item")),
	"cbf.exists": bfDoc("Reports whether an item may be in a counting Bloom filter", "0.1.0", oBloomItem,
		keyArg(), str("item")),
	"cbf.mexists": bfDoc("Reports, for each item, whether it may be in a counting Bloom filter", "0.1.0", oBloomItems,
		keyArg(), many(str("item"))),
	"cbf.count": bfDoc("Returns an upper bound of how many times an item was added to a counting Bloom filter", "0.1.0",
		oBloomItem, keyArg(), str("item")),
	"cbf.info": bfDoc("Returns the parameters and fill of a counting Bloom filter", "0.1.0", "O(1)", keyArg()),
}

// docOf is name's documentation (an empty one, in group "generic", for a
// command without).
func docOf(name string) *cmdDoc {
	if d, ok := filterDocs[name]; ok {
		return d
	}
	if d, ok := serverDocs[name]; ok {
		return d
	}
	return &cmdDoc{group: "generic"}
}

// writeDocs renders cmd's documentation as Redis's COMMAND DOCS does: a map
// of summary, since, group, complexity, module, arguments and, for a
// container, its subcommands' documentation by name.
func writeDocs(w *reply, cmd *command) {
	d := docOf(cmd.name)
	n := 1 // group
	for _, v := range []string{d.summary, d.since, d.complexity, d.module} {
		if v != "" {
			n++
		}
	}
	if len(d.args) > 0 {
		n++
	}
	if len(cmd.subs) > 0 {
		n++
	}
	w.mapHeader(n)
	pair := func(k, v string) {
		if v != "" {
			w.bulkString(k)
			w.bulkString(v)
		}
	}
	pair("summary", d.summary)
	pair("since", d.since)
	w.bulkString("group")
	w.bulkString(d.group)
	pair("complexity", d.complexity)
	pair("module", d.module)
	if len(d.args) > 0 {
		w.bulkString("arguments")
		writeArgDocs(w, d.args)
	}
	if len(cmd.subs) > 0 {
		w.bulkString("subcommands")
		w.mapHeader(len(cmd.subs))
		for _, sc := range cmd.subs {
			w.bulkString(sc.name)
			writeDocs(w, sc)
		}
	}
}

// writeArgDocs renders arguments as Redis does: name, type, display_text
// (but for a oneof or block), token, flags (a set of optional, multiple),
// and a oneof's or block's own arguments.
func writeArgDocs(w *reply, args []argDoc) {
	w.array(len(args))
	for _, a := range args {
		nested := a.typ == "oneof" || a.typ == "block"
		var flags []string
		if a.optional {
			flags = append(flags, "optional")
		}
		if a.multiple {
			flags = append(flags, "multiple")
		}
		n := 3 // name, type, and display_text or arguments
		if a.token != "" {
			n++
		}
		if len(flags) > 0 {
			n++
		}
		w.mapHeader(n)
		w.bulkString("name")
		w.bulkString(a.name)
		w.bulkString("type")
		w.bulkString(a.typ)
		if !nested {
			w.bulkString("display_text")
			w.bulkString(a.name)
		}
		if a.token != "" {
			w.bulkString("token")
			w.bulkString(a.token)
		}
		if len(flags) > 0 {
			w.bulkString("flags")
			w.set(len(flags))
			for _, f := range flags {
				w.simple(f)
			}
		}
		if nested {
			w.bulkString("arguments")
			writeArgDocs(w, a.args)
		}
	}
}
