"""The AWS JSON 1.0 front door: parse and validate requests, route them to the engine or the store, and answer
in AWS's shapes and error names. Nothing here decides how an execution moves; that is the engine's job."""
