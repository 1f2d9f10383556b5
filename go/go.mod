module podmux.dev/podmux

go 1.19
