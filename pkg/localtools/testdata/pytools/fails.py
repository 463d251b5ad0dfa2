def execute(params):
    raise ValueError("the ticket system is read-only today")
