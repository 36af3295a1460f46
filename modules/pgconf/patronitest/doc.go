// Package patronitest holds pgconf's acceptance tests on a real Patroni
// cluster (three members and etcd on loopback, see testhost.Patroni): one
// cluster per test binary, shared by the subtests.
package patronitest
