"""The paper's ten benchmarks (Bamboogle, 2Wiki, HotpotQA, Musique, GAIA, AIME24, AMC23, GameOf24, GPQA, MedQA):
their sources, how rows become tasks, their scorers, and one :class:`~benchmarks.specs.BenchmarkSpec` each.

Tasks load three ways: an AgentFlow test folder (``data_dir=`` or ``$AGENTFLOW_DATA_DIR``), the Hugging Face
hub (``source='hub'``, or ``hub_dataset=`` a hub id or a folder saved with ``save_to_disk``), or one
JSONL/JSON/Parquet file (``path=`` with ``columns=``). Task ids are content hashes (MedQA repeats pids).

Modules: :mod:`.catalog` (the ten benchmarks), :mod:`.fields` and :mod:`.rows` (records to tasks),
:mod:`.choice` (multiple choice), :mod:`.loading` (folder, hub or file), :mod:`.specs` (scorers and specs).
"""
