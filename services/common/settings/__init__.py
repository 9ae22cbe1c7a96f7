"""The config file (config_file.py: one YAML file and `MQSTORE_*` variables → `LoadedConfig`)
and one module per section: service.py (writer, indexer, notifier), remoting.py,
replication.py, tls.py, topics.py, auth.py; values.py parses sizes and durations."""
