package certs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/rookerydb/rookery/internal/atomicfile"
)

// ErrExists reports that a file would be replaced without force.
var ErrExists = errors.New("certs: file exists")

// CAFiles names the CA's certificate and key in dir.
func CAFiles(dir string) (cert, key string) {
	return filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
}

// CertFiles names the certificate and key of name in dir.
func CertFiles(dir, name string) (cert, key string) {
	return filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
}

// WriteCA makes a new CA into dir (created if missing) as ca.pem and
// ca-key.pem. It refuses to replace an existing CA unless force: every
// certificate the old one signed would stop being trusted.
func WriteCA(dir string, validFor time.Duration, force bool) error {
	certFile, keyFile := CAFiles(dir)
	if err := refuseExisting(force, certFile, keyFile); err != nil {
		return err
	}
	ca, err := NewCA(validFor)
	if err != nil {
		return err
	}
	return writePair(dir, ca, certFile, keyFile)
}

// WriteCert issues a node certificate for node id name with the CA in caDir and writes it
// into outDir as NAME.pem and NAME-key.pem. It refuses to replace existing
// files unless force.
func WriteCert(caDir, name string, hosts []string, outDir string, validFor time.Duration, force bool) error {
	if err := CheckName(name); err != nil {
		return err
	}
	ca, err := ReadPair(CAFiles(caDir))
	if err != nil {
		return err
	}
	certFile, keyFile := CertFiles(outDir, name)
	if err := refuseExisting(force, certFile, keyFile); err != nil {
		return err
	}
	p, err := Issue(ca, name, hosts, validFor)
	if err != nil {
		return err
	}
	return writePair(outDir, p, certFile, keyFile)
}

// WriteClientCert issues a client certificate for name with the CA in caDir
// and writes it into outDir as NAME.pem and NAME-key.pem. It refuses to
// replace existing files unless force.
func WriteClientCert(caDir, name, outDir string, validFor time.Duration, force bool) error {
	if err := CheckName(name); err != nil {
		return err
	}
	ca, err := ReadPair(CAFiles(caDir))
	if err != nil {
		return err
	}
	certFile, keyFile := CertFiles(outDir, name)
	if err := refuseExisting(force, certFile, keyFile); err != nil {
		return err
	}
	p, err := IssueClient(ca, name, validFor)
	if err != nil {
		return err
	}
	return writePair(outDir, p, certFile, keyFile)
}

// Init makes what a new cluster needs in dir, keeping what is there: the CA
// unless ca.pem exists, and a certificate for each name unless NAME.pem exists.
// Container set-ups run it at every start.
func Init(dir string, names, hosts []string) (made []string, err error) {
	caCert, _ := CAFiles(dir)
	if _, err := os.Stat(caCert); errors.Is(err, fs.ErrNotExist) {
		if err := WriteCA(dir, DefaultCAValidity, false); err != nil {
			return made, err
		}
		made = append(made, caCert)
	}
	for _, n := range names {
		certFile, _ := CertFiles(dir, n)
		if _, err := os.Stat(certFile); err == nil {
			continue
		}
		if err := WriteCert(dir, n, hosts, dir, DefaultCertValidity, false); err != nil {
			return made, err
		}
		made = append(made, certFile)
	}
	return made, nil
}

// InitNodeDirs is Init for containers that must each hold only their own
// material: the CA stays in dir, and each name gets a directory dir/NAME of
// its own holding NAME.pem, NAME-key.pem and a copy of ca.pem, never the CA's
// key. What is there is kept, except a copy of ca.pem that differs from
// dir/ca.pem.
func InitNodeDirs(dir string, names, hosts []string) (made []string, err error) {
	made, err = Init(dir, nil, nil)
	if err != nil {
		return made, err
	}
	caCert, _ := CAFiles(dir)
	caPEM, err := os.ReadFile(caCert)
	if err != nil {
		return made, err
	}
	for _, n := range names {
		if err := CheckName(n); err != nil {
			return made, err
		}
		sub := filepath.Join(dir, n)
		certFile, _ := CertFiles(sub, n)
		if _, err := os.Stat(certFile); errors.Is(err, fs.ErrNotExist) {
			if err := WriteCert(dir, n, hosts, sub, DefaultCertValidity, false); err != nil {
				return made, err
			}
			made = append(made, certFile)
		}
		copyFile, _ := CAFiles(sub)
		if have, err := os.ReadFile(copyFile); err == nil && string(have) == string(caPEM) {
			continue
		}
		if err := atomicfile.Write(copyFile, caPEM, 0o644); err != nil {
			return made, err
		}
		made = append(made, copyFile)
	}
	return made, nil
}

// ReadPair reads a certificate and key from files.
func ReadPair(certFile, keyFile string) (Pair, error) {
	c, err := os.ReadFile(certFile)
	if err != nil {
		return Pair{}, err
	}
	k, err := os.ReadFile(keyFile)
	if err != nil {
		return Pair{}, err
	}
	return Pair{CertPEM: c, KeyPEM: k}, nil
}

func refuseExisting(force bool, files ...string) error {
	if force {
		return nil
	}
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			return fmt.Errorf("%w: %s (use --force to replace it)", ErrExists, f)
		}
	}
	return nil
}

// writePair writes the key (owner-only) and the certificate, each through a
// temporary file renamed into place, so a reader never sees half a file.
func writePair(dir string, p Pair, certFile, keyFile string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(keyFile, p.KeyPEM, 0o600); err != nil {
		return err
	}
	return atomicfile.Write(certFile, p.CertPEM, 0o644)
}
