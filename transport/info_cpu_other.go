//go:build !unix

package transport

// infoCPU has nothing to say where there is no getrusage.
func infoCPU(s *Server, b *infoBuf) {}
