package redisx

import "strings"

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = 16384

// KeySlot returns the Redis Cluster hash slot of key, as CLUSTER KEYSLOT
// computes it: the CRC16 (XMODEM) of the key's hash tag, modulo
// ClusterSlots. The tag is what lies between the first '{' and the first
// '}' after it, when that is not empty; otherwise the whole key counts.
func KeySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return int(crc16(key) % ClusterSlots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
