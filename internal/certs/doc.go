// Package certs makes and serves the certificates of a Rookery cluster.
//
// A cluster has one certificate authority (CA) of its own, and the CA signs
// two kinds of certificate (Identify tells them apart):
//
//   - A node certificate names one node (a URI rookery://node/ID and the
//     subject OU "node"), good both for serving and for dialling. On the Raft
//     port both ends of every connection present theirs and check the
//     other's against the CA (mutual TLS), so a stranger without a
//     certificate from this CA is dropped at the handshake, before a byte of
//     Raft is read; the cluster package then lets a peer speak only as the
//     node its certificate names. The same certificate serves RESP and HTTP
//     over TLS for clients, which check it against ca.pem (redis-cli --tls
//     --cacert ca.pem).
//   - A client certificate (rookery://client/NAME, OU "client") is good only
//     for dialling: it opens RESP and HTTP under --tls-client-auth, never the
//     Raft port.
//
// A certificate made before the two kinds existed carries neither mark: it is
// legacy, taken as the node its common name names under the cluster's
// transition rules until it is re-issued.
//
// Making them (standard library crypto only, ECDSA P-256):
//
//	NewCA, Issue, IssueClient           in memory, as PEM
//	WriteCA, WriteCert, WriteClientCert into files: ca.pem, ca-key.pem, NAME.pem, NAME-key.pem
//
// Serving them: a Source holds the CA pool and the node's key pair loaded from
// files, hands out tls.Configs that consult it on every handshake, and reloads
// the files on demand (SIGHUP) or when they change on disk, so certificates are
// rotated without a restart. A reload that fails (a half-written file, a key
// that does not match its certificate, a certificate the CA did not sign)
// keeps the certificates in use and reports why.
//
// Peers check each other's certificate chain against the CA but not the host
// name: nodes dial each other at addresses (container names, IPs behind NAT)
// that a certificate made in advance may not list, and only the CA's holder can
// make a certificate it accepts. Clients of RESP and HTTP check host names as
// usual, so node certificates list 127.0.0.1, localhost and the hosts given.
package certs
