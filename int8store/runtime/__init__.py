"""What every part of int8store leans on, and nothing else: the memory
ceiling and the checks of sizes a file announces (:mod:`.limits`), the one
reader of ``.npz`` archives, which checks them (:mod:`.npz`: data sources,
checkpoints and saved models), what a file to read must be
(:mod:`.files`), signals
(:mod:`.interrupts`), helper processes (:mod:`.processes`), temporary
files a killed run leaves (:mod:`.temporaries`), glibc's
allocator after a load (:mod:`.allocator`), counts and suggestions in messages
(:mod:`.words`), command lines whose errors are one line
(:mod:`.arguments`) and the package version (:mod:`.version`).

May import: :mod:`int8store.errors` only.
"""
