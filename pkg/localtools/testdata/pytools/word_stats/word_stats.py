# A tool in a folder of its own, importing a module beside it.
from counting import count_words


def execute(params):
    return {"words": count_words(params["text"])}
