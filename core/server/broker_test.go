package server_test

import (
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/server"
)

// TestOpenBrokerOnACluster: broker.redis.cluster_urls makes a Redis broker on a cluster, which
// starts down, without an error, when no seed answers; a seed URL the cluster client cannot use
// stops the server.
func TestOpenBrokerOnACluster(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	c := config.Defaults()
	c.Broker.Redis.ClusterURLs = config.URLList{"redis://" + addr}
	b, err := server.OpenBroker(t.Context(), c, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("open a broker on a cluster that does not answer: %v", err)
	}
	defer b.Close()
	r, ok := b.(*popup.Redis)
	if !ok {
		t.Fatalf("broker is a %T, want *popup.Redis", b)
	}
	if r.Up() {
		t.Error("a broker on a cluster that does not answer is up")
	}

	c.Broker.Redis.ClusterURLs = config.URLList{"redis://" + addr + "/3"}
	if b, err := server.OpenBroker(t.Context(), c, nil, prometheus.NewRegistry()); err == nil {
		b.Close()
		t.Error("a cluster seed naming database 3 was accepted")
	}
}
