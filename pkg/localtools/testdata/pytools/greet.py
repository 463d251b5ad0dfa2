# A lollms-style local tool: a module defining execute(params).
def execute(params: dict) -> dict:
    name = params.get("name", "world")
    print("debug: greeting", name)  # a stray print must not spoil the result
    return {"greeting": f"Hello, {name}!"}
