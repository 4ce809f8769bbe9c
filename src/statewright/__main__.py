from .cli import main

if __name__ == "__main__":  # not when a process the server spawns (the heavy lane) imports it as its main module
    raise SystemExit(main())
