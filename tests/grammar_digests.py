"""Digests that pin each grammar's verdicts and readings, so a later grammar cannot move an older id's scores: the
reward of every answer style through ``env.step`` (one "1"/"0" per answer, rotating formats), and the scorer's
reading (text, whether it hedges, its score) of a larger sample. ``tests/env/scoring/test_pinned_grammars.py``
checks every entry. Each digest was recorded at the commit before the next grammar existed (v3 at aad5736, v4 at
2e57b6c, v5 at 900cece, v6 at 066f447, v7 once answer grammar 7 was written, v8 once answer grammar 8 was
written, v9 once answer grammar 9 was written, v10 once answer grammar 10 was written, v11 once answer grammar 11
was written, v12 once answer grammar 12 was written); a new grammar adds its version to the tables below (a digest
that stays the same gets the version added to its tuple)."""

from __future__ import annotations

import hashlib
import warnings

import gymnasium as gym

from tests.answer_styles import FORMATS, HALVES, action, task_styles
from tests.reward_cases import golds_of, kind_of, spread


def make(env_id: str, data_dir: object = None) -> gym.Env:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gym.make(env_id, **({"data_dir": str(data_dir)} if data_dir else {}))


# the paper benchmarks, pinned where AgentFlow's test sets are found
PAPER = ("Bamboogle", "TwoWiki", "HotpotQA", "Musique", "GAIA", "AIME24", "AMC23", "GameOf24", "GPQA", "MedQA")

# the -v3 verdicts, on grammar 4's smaller sample (VERDICTS_V3_SAMPLE): benchmark -> digest
VERDICTS_V3 = {
    "Gen-MultiHop": "acf5c2d3eb3181e4:96",
    "Gen-Agentic": "4eead2b72e0e7c4e:96",
    "Gen-Math": "5714c77d1b6c0f14:96",
    "Gen-GameOf24": "88a0e978593751e0:84",
    "Gen-Science": "019409d612c26bfc:84",
    "Gen-HopChain": "001f9a82a1af1987:96",
    "Bamboogle": "afd1f1f053bdfbe0:96",
    "TwoWiki": "cf882f24ea766c7e:96",
    "HotpotQA": "08a4f3d5004d2e3b:96",
    "Musique": "4f496d4511072620:96",
    "GAIA": "479ec52e10d0e7a7:96",
    "GameOf24": "88a0e978593751e0:84",
    "GPQA": "e0a74bc8e558be79:84",
    "MedQA": "5cb64a89411f0cc0:84",
}
VERDICTS_V3_SAMPLE = {"tasks": 2, "per_kind": 6, "seed": 3}
# benchmark -> {digest: the id versions it pins}
VERDICTS = {
    "Gen-GameOf24": {"45fc78dd39d68e00:224": (4, 5, 6, 7, 8, 9, 10, 11, 12)},
    "Gen-MultiHop": {"9a5c59881f5fd7c5:256": (4, 5, 6, 7, 8, 9, 10, 11, 12)},
    "Gen-Math": {"9a5c59881f5fd7c5:256": (4, 5, 6, 7, 8, 9, 10, 11, 12)},
    "Gen-Science": {"45fc78dd39d68e00:224": (4, 5, 6, 7, 8, 9, 10, 11, 12)},
    "Gen-Agentic": {"3dc9c067427b9211:256": (4,), "9a5c59881f5fd7c5:256": (5, 6, 7, 8, 9, 10, 11, 12)},
    "Gen-HopChain": {"9a5c59881f5fd7c5:256": (4, 5, 6, 7, 8, 9, 10, 11, 12)},
}
READINGS = {
    "Gen-GameOf24": {
        "ae491e94a5d3ec82:420": (4,),
        "921e66e1b1d034ea:420": (5, 6),
        "8150c7a921e86424:420": (7,),
        "1d19310da5f94937:420": (8,),
        "4d47751ad64a9368:420": (9,),
        "bf408f4cb1e320c9:420": (10,),
        "ddaba176d4fef82d:420": (11, 12),
    },
    "Gen-MultiHop": {
        "6f6c97a3f52bc146:480": (4,),
        "cc2be0a7a0618956:480": (5, 6),
        "fbbc4dd4cad087fc:480": (7,),
        "5bb0a26b3477561f:480": (8,),
        "d03eabf6b8fc0f7f:480": (9, 10, 11, 12),
    },
    "Gen-Math": {
        "ced5214f97f3648a:480": (4,),
        "63c3a40bab76b550:480": (5, 6),
        "9dad17937747ccb6:480": (7,),
        "1c7569c7490c921b:480": (8,),
        "a168101205407552:480": (9, 10),
        "f652c04940bce649:480": (11, 12),
    },
    "Gen-Science": {
        "510e433955c21999:420": (4,),
        "ec6e700b129523cc:420": (5, 6),
        "fe520574f3884b9f:420": (7,),
        "5d73f594aeee89a0:420": (8,),
        "e38533aae2c9eb5c:420": (9, 10),
        "ef62d4cce4c051ab:420": (11, 12),
    },
    "Gen-Agentic": {
        "f4fcca06d7f18458:480": (4,),
        "3b19485c808fa555:480": (5, 6),
        "aa54a8086d4a80c9:480": (7,),
        "f3906617b52620c0:480": (8,),
        "b9a15738240fd855:480": (9, 10),
        "6b88bc6884a49e7b:480": (11, 12),
    },
    "Gen-HopChain": {
        "7b4cd2f42fed39eb:480": (4,),
        "2f3a7c1b30f87db5:480": (5, 6),
        "31169065ec6fe76a:480": (7,),
        "eb55111d1ea3baa0:480": (8,),
        "f9f7332c35f9df34:480": (9, 10),
        "1ea423d202cf39e9:480": (11, 12),
    },
    "Bamboogle": {
        "5421f17fc4485748:480": (4,),
        "bea1e4367087dda5:480": (5, 6),
        "6fece0622e01fb2b:480": (7,),
        "cb635fa172d85c33:480": (8,),
        "792bd73633cb0a6a:480": (9,),
        "ebd46f5865be984c:480": (10, 11, 12),
    },
    "TwoWiki": {
        "3a5b7d352e44a07c:480": (4,),
        "783638a73ee09fbd:480": (5, 6),
        "e15e26caf434f3f3:480": (7,),
        "83c4ec282ad38afc:480": (8,),
        "37fb9ce2dd7ce653:480": (9,),
        "189c1c42db8a5917:480": (10, 11, 12),
    },
    "HotpotQA": {
        "f06acc21483ae2cc:400": (4,),
        "52b76cfaa5d4e739:400": (5, 6),
        "d8eb78c67409a57b:400": (7,),
        "1c7a31134fc30db0:400": (8,),
        "9b82069fe570b381:400": (9, 10, 11, 12),
    },
    "Musique": {
        "ab09533fbdbae5e2:480": (4,),
        "99d92ce2a29d4d92:480": (5, 6),
        "9f1c532f429ac8b9:480": (7,),
        "b4caa05728344bf4:480": (8,),
        "90f19ffa32e64c8d:480": (9, 10, 11, 12),
    },
    "GAIA": {
        "7e0214afae58111c:400": (4,),
        "6f51652825976772:400": (5, 6),
        "6faa19b1f2a7f101:400": (7,),
        "001937f6bd97e55d:400": (8,),
        "951fed653c3d426f:400": (9,),
        "6cc2eb31a484a3b7:400": (10,),
        "3d7148eeef1cc9f7:400": (11, 12),
    },
    "AIME24": {
        "046685c7f72ae553:480": (4,),
        "69f424d7ec256d94:480": (5, 6),
        "2388ad73ad19f288:480": (7,),
        "f275d773c432b1b7:480": (8,),
        "383e60e31b44ea2b:480": (9,),
        "471a61ecbdd135ba:480": (10,),
        "6ce0f81f956fc39a:480": (11, 12),
    },
    "AMC23": {
        "f8d193880cf6956b:480": (4,),
        "ef6d02e371d9b0c3:480": (5, 6),
        "173b142dbbd2c293:480": (7,),
        "84a9333bc2d995d3:480": (8,),
        "0c2c21c310dcba85:480": (9, 10),
        "7e410f1062682b85:480": (11, 12),
    },
    "GameOf24": {
        "1fdb90890492a70d:420": (4,),
        "7901b8799fe3c1d6:420": (5, 6),
        "e9ccae01a82528d3:420": (7,),
        "513faefd2e86aa31:420": (8,),
        "6e69bba23b2d1c70:420": (9, 10),
        "0f707c8d5c132ac8:420": (11, 12),
    },
    "GPQA": {
        "dcd8bcf77898b70b:420": (4,),
        "9337e57254253b09:420": (5, 6),
        "5845f15eaa0ea5d6:420": (7,),
        "fe64f3914e66b3f7:420": (8,),
        "1010a77b1e885583:420": (9, 10),
        "e0e2058acff99784:420": (11, 12),
    },
    "MedQA": {
        "903cda7054279a03:420": (4,),
        "4e6d7077e045b0ad:420": (5, 6),
        "78717da10270a748:420": (7,),
        "9d565aacca986548:420": (8,),
        "f49068efeb8da4c2:420": (9, 10),
        "53c67b099daa63ff:420": (11, 12),
    },
}


def verdicts(env_id: str, data_dir: object = None, tasks: int = 4, per_kind: int = 8, seed: int = 5) -> str:
    env = make(env_id, data_dir)
    base = env.unwrapped
    kind = kind_of(base.scorer)
    pool = [g for i in spread(len(base.tasks), 60) for g in golds_of(base.tasks[i])]
    bits, n = [], 0
    for index in spread(len(base.tasks), tasks):
        for half in HALVES:
            for style in task_styles(base.tasks[index], kind, pool, half, per_kind=per_kind, seed=seed):
                env.reset(options={"index": index})
                bits.append("1" if env.step(action(style.answer, FORMATS[n % 3]))[1] >= 1 else "0")
                n += 1
    return hashlib.sha256("".join(bits).encode()).hexdigest()[:16] + f":{len(bits)}"


def readings(env_id: str, data_dir: object = None) -> str:
    base = make(env_id, data_dir).unwrapped
    kind = kind_of(base.scorer)
    pool = [g for i in spread(len(base.tasks), 60) for g in golds_of(base.tasks[i])]
    digest, n = hashlib.sha256(), 0
    for index in spread(len(base.tasks), 6):
        task = base.tasks[index]
        for half in HALVES:
            for style in task_styles(task, kind, pool, half, per_kind=10, seed=11):
                text, hedge = base.scorer.read(style.answer, task)
                digest.update(f"{text}\x00{hedge is None}\x00{base.scorer(style.answer, task)}\x01".encode())
                n += 1
    return digest.hexdigest()[:16] + f":{n}"
