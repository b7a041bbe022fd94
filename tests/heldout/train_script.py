import torch
import torch.nn as nn


def train(build_model, loader, epochs=1):
    net = build_model()
    net.compile()
    model = torch.nn.DataParallel(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x, y)
            loss.backward()
            optimizer.step()
    torch.save(model.state_dict(), "last.pt")
    return model.predict(x)
