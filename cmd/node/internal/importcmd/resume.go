package importcmd

import (
	"os"
	"strconv"
	"strings"
)

// progName is the binary as it was run (bin/rookery, rookery), for the
// command printed to resume an import.
func progName() string {
	if len(os.Args) == 0 || os.Args[0] == "" {
		return "rookery"
	}
	return os.Args[0]
}

// resumeCommand is the command line that resumes the import after line
// skip: the one that was run, with its --skip (if any) replaced by --skip
// skip, quoted for a POSIX shell.
func (im *importer) resumeCommand(skip int64) string {
	words := []string{shellQuote(im.progName), "import"}
	for i := 0; i < len(im.args); i++ {
		a := im.args[i]
		name := strings.TrimLeft(a, "-")
		if a != name && a != "-" && a != "--" && (name == "skip" || strings.HasPrefix(name, "skip=")) {
			if name == "skip" {
				i++ // its value
			}
			continue
		}
		words = append(words, shellQuote(a))
	}
	if skip > 0 {
		words = append(words, "--skip", strconv.FormatInt(skip, 10))
	}
	return strings.Join(words, " ")
}

// skipNote is " with --skip N", or "" when nothing is to be skipped.
func (im *importer) skipNote(skip int64) string {
	if skip == 0 {
		return ""
	}
	return " with --skip " + strconv.FormatInt(skip, 10)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
