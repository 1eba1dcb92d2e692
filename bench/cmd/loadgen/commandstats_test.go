package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=100,usec=900,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hmget:calls=100,usec=50,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_cluster|slots:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n"
	stats, err := parseCommandStats(info)
	require.NoError(t, err)
	assert.Equal(t, commandStats{"evalsha": 100, "hmget": 100, "cluster|slots": 3, "info": 7}, stats)

	_, err = parseCommandStats("cmdstat_get:usec=1\r\n")
	assert.ErrorContains(t, err, "no calls=")
	_, err = parseCommandStats("cmdstat_get:calls=x\r\n")
	assert.Error(t, err)
}

func TestCommandStatsSince(t *testing.T) {
	before := commandStats{"evalsha": 10, "hmget": 10, "info": 2, "replconf": 5, "ping": 1}
	after := commandStats{"evalsha": 110, "hmget": 110, "info": 4, "replconf": 9, "ping": 1, "hset": 100}
	d := after.since(before)
	assert.Equal(t, commandStats{"evalsha": 100, "hmget": 100, "hset": 100}, d)
	assert.Equal(t, uint64(300), d.total())

	cost := newRedisCost(d, 100)
	assert.InDelta(t, 3.0, cost.PerDecision, 1e-9)
	assert.InDelta(t, 1.0, cost.EvalshaPerDecision, 1e-9)
	assert.Zero(t, newRedisCost(d, 0).PerDecision)
}

func TestInfoField(t *testing.T) {
	info := "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"
	assert.Equal(t, "master", infoField(info, "role"))
	assert.Equal(t, "0", infoField(info, "connected_slaves"))
	assert.Equal(t, "", infoField(info, "master_link_status"))
}
