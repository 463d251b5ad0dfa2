package bus

import (
	"os"
	"strconv"

	"github.com/nats-io/nuid"
)

// InstanceID names one holder of a lease (healthd's leadership, a token refresh): the
// host, the process id and a random suffix, so that two replicas in one process differ.
func InstanceID() string {
	host, _ := os.Hostname()
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + nuid.Next()[16:]
}
