module sluice/runtimes/go-http

go 1.22
