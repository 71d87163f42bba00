"""LongEmbed-style synthetic tasks: seeded passkey and needle retrieval over long documents (`synthetic`), scored
Acc@1 per length group (`scoring`); `run` holds the one-call jobs (``lengthwise longdoc synth`` / ``eval``).
"""
