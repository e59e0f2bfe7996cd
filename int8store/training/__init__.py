"""The training loop's own tools: many minibatch updates in one call of the
compiled step (:mod:`.steps`: :func:`~.steps.steps_function`, and the
epoch's minibatches grouped into such calls, :func:`~.steps.minibatch_calls`),
a split scored every example once (:mod:`.scoring`: in JAX mode in one call,
:func:`~.scoring.scoring_function`), and a checkpoint that holds a run, to
resume it exactly (:mod:`.run`: :class:`~.run.RunCheckpoint`), checked
against the run before anything is set: its parameters against the model's
(:mod:`.parameters`, also for a saved model:
:func:`~.parameters.load_parameters`) and its loop's numbers
(:mod:`.early_stopping`).

May import: everything below it on the spine (:mod:`int8store.errors`,
``runtime``, ``codes``, ``order``, ``augment``, ``backend``, ``store``, ``sources``, ``plan``,
``memory``, ``dataset``, ``streaming``, ``loading``).
"""
