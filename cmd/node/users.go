package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/acl"
	"github.com/rookerydb/rookery/transport"
)

// users builds the node's users (the default user, --requirepass its
// password) and reads --aclfile, whose users seed a cluster that has never
// set users (seedUsers): the encoded set, or nil without a file.
func (o *options) users() (*acl.Store, []byte, error) {
	reg, err := transport.ACLRegistry()
	if err != nil {
		return nil, nil, err
	}
	users := acl.NewStore(reg, o.requirePass)
	if o.aclFile == "" {
		return users, nil, nil
	}
	f, err := os.Open(o.aclFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--aclfile: %w", err)
	}
	defer f.Close()
	list, err := acl.ParseFile(f, o.aclFile, reg)
	if err != nil {
		return nil, nil, fmt.Errorf("--aclfile: %w", err)
	}
	return users, acl.Encode(list), nil
}

// seedUsers proposes the users of --aclfile to the cluster until it has
// answered: they apply if the cluster has never set users, and change
// nothing otherwise (a cluster's users are its own once set: ACL SETUSER).
func seedUsers(ctx context.Context, node *cluster.Node, data []byte, path string, log *slog.Logger) {
	for {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := node.SubmitUsers(&fsm.Command{Op: fsm.OpACLLoad, Data: data}).Wait(wctx)
		cancel()
		switch {
		case err == nil && res.Err == nil && len(res.Ints) == 1 && res.Ints[0] == 1:
			log.Info("users loaded from the ACL file", "path", path)
			return
		case err == nil && res.Err == nil:
			log.Info("the cluster's users are already set: the ACL file changes nothing", "path", path)
			return
		case err == nil:
			log.Error("the ACL file's users were refused", "path", path, "err", res.Err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
