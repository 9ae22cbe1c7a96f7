"""What the three services share, below the writer, indexer, notifier, admin and auth
(the services-layers contract in .importlinter), one folder per purpose:

    settings/   the config file and its sections (`mqstore.yaml`, `MQSTORE_*` variables)
    http/       the HTTP services' basics: error answers, bodies, the server, OpenAPI, the
                binary batch bodies of /v1/batch
    links/      the binary TCP links between processes: the frame reader and writer every
                one uses, the forward link's requests and secret, the mutual proof
    process/    how a service process runs: start and stop, event loop, the parent's
                death, the local ports `mqstore up` uses
    observability/  logs and metrics
    topics/     the topic rules every door applies, and the queue choice
"""
