"""The Python sandbox behind ``Python_Coder_Tool``: a preloaded fork server and its per-tool workers.

``zygote`` runs inside the sandbox (a standalone script); ``launcher`` is the host side that starts and talks to it.
"""
