package acl

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseFile(t *testing.T) {
	reg := mustNewRegistry(t)
	file := "# operators\n" +
		"user default on #" + HashPassword("sesame") + " ~* &* +@all\r\n" +
		"\n" +
		"   \n" +
		"user reader   on >r\t %R~app:* -@all +@read +@bloom\n" +
		"  # indented comment\n" +
		"user writer on nopass ~w:* +@write -bf.loadchunk"
	users, err := ParseFile(strings.NewReader(file), "users.acl", reg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range users {
		got = append(got, u.Describe())
	}
	want := []string{
		"user default on sanitize-payload #" + HashPassword("sesame") + " ~* &* +@all",
		"user reader on sanitize-payload #" + HashPassword("r") + " %R~app:* resetchannels -@all +@read +@bloom",
		"user writer on nopass sanitize-payload ~w:* resetchannels -@all +@write -bf.loadchunk",
	}
	if !slices.Equal(got, want) {
		t.Errorf("users\n%q\nwant\n%q", got, want)
	}
	// Runs of spaces between rules are empty rules, which do nothing; a
	// rule's edges lose their tabs as in Redis: the password is "r".
	if !users[1].CheckPassword("r") {
		t.Error("password with its trailing tab")
	}

	// The file written back reads back the same.
	again, err := ParseFile(strings.NewReader(FormatFile(users)), "again.acl", reg)
	if err != nil {
		t.Fatal(err)
	}
	if FormatFile(again) != FormatFile(users) {
		t.Errorf("round trip:\n%s\n%s", FormatFile(again), FormatFile(users))
	}

	// No default user: Redis's.
	users, err = ParseFile(strings.NewReader("user bob on\n"), "f", reg)
	if err != nil || len(users) != 2 || users[0].Describe() != "user bob on sanitize-payload resetchannels -@all" ||
		users[1].Describe() != "user default on nopass sanitize-payload ~* &* +@all" {
		t.Errorf("without default: %v, %v", users, err)
	}
}

func TestParseFileErrors(t *testing.T) {
	file := strings.Join([]string{
		"user ok on",
		"User bob on",            // 2: the keyword is lower case
		"user",                   // 3: no name
		"user ok off",            // 4: twice
		"user carl on +nosuch",   // 5: an unknown command is quoted
		"user dave on <secret",   // 6: another error is not (it may hold a password)
		"user\teve on",           // 7: words are split on spaces only
		"user frank on ~* ~a",    // 8
		"user gina\x0bx on",      // 9: a vertical tab in the name
		"user hal on +@nosuch x", // 10: the first bad rule only
		"user  ivy on",           // 11: two spaces: the name is "", and "ivy" a rule
	}, "\n")
	users, err := ParseFile(strings.NewReader(file), "users.acl", mustNewRegistry(t))
	if users != nil || !errors.Is(err, ErrFile) {
		t.Fatalf("%v, %v", users, err)
	}
	want := []string{
		"acl: bad aclfile: users.acl:2: should start with user keyword followed by the username",
		"acl: bad aclfile: users.acl:3: should start with user keyword followed by the username",
		"acl: bad aclfile: users.acl:4: duplicate user 'ok'",
		"acl: bad aclfile: users.acl:5: Error in applying operation '+nosuch': Unknown command or category name in ACL",
		"acl: bad aclfile: users.acl:6: The password you are trying to remove from the user does not exist",
		"acl: bad aclfile: users.acl:7: should start with user keyword followed by the username",
		"acl: bad aclfile: users.acl:8: " + msgKeysAfterAll,
		"acl: bad aclfile: users.acl:9: username 'gina\vx' contains invalid characters",
		"acl: bad aclfile: users.acl:10: Error in applying operation '+@nosuch': Unknown command or category name in ACL",
		"acl: bad aclfile: users.acl:11: Syntax error",
	}
	if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, want) {
		t.Errorf("errors\n%q\nwant\n%q", got, want)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Error("a password in the error")
	}
}
