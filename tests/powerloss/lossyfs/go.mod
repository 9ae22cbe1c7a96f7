module mqstore.local/lossyfs

go 1.24

require (
	github.com/hanwen/go-fuse/v2 v2.9.0
	golang.org/x/sys v0.28.0
)
