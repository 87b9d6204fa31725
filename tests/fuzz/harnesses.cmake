# The fuzz harnesses: <name>_fuzz.cc each, seeds in corpus/<name>/, crashes in regressions/<name>/.
set(chorus_fuzz_harnesses frame_decoder hello handshake store_server store_server_keyed store_client
    tuning_file store_url options record)
# Harnesses that need the loopback helpers.
set(chorus_fuzz_loopback_harnesses store_server store_server_keyed store_client)
