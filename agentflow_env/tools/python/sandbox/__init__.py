"""The Python sandbox behind ``Python_Coder_Tool``: a preloaded fork server and its per-tool workers.

``launcher`` is the host side (picks the isolation, starts the zygote, talks to workers); ``view`` lists what the
sandbox may see; ``zygote`` (run inside, a standalone script) forks the workers; ``rootfs`` builds the view without
bubblewrap; ``nslib`` wraps the Linux calls (namespaces, mounts, capabilities, seccomp) for both; ``cgroups`` gives
each worker cgroup v2 limits where a delegated cgroup is writable.
"""
